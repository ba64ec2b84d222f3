# SPDX-License-Identifier: GPL-2.0
#
# Installing the module through DKMS, and the Debian packages.
#
#   make userspace      library, plabel command, manual pages (what the
#                       packages build; no kernel headers needed)
#   make dkms-source    the module's sources and dkms.conf into
#                       $(DESTDIR)/usr/src/plabel-VERSION/
#   make dkms-install   that, then DKMS builds and installs plabel.ko for
#                       DKMS_KERNEL (default: the running kernel); as root
#   make dkms-remove    DKMS forgets the module (every kernel) and its sources
#   make deb            build/deb/{plabel-dkms,libplabel1,libplabel-dev,plabel}_*.deb
#                       (scripts/build-deb: dpkg-buildpackage in a copy of
#                       the tree under build/deb/, then lintian)

DKMS_NAME	:= plabel
DKMS_SRC	:= /usr/src/$(DKMS_NAME)-$(PLABEL_VERSION)
DKMS_KERNEL	?= $(shell uname -r)

.PHONY: userspace dkms-source dkms-install dkms-remove deb
userspace: libplabel $(HEAP_LIB) $(PLABEL_BIN) man

dkms-source: $(KMOD_SRCS) dkms.conf VERSION
	install -d $(DESTDIR)$(DKMS_SRC)
	install -m 0644 $(KMOD_SRCS) $(DESTDIR)$(DKMS_SRC)/
	sed 's/#MODULE_VERSION#/$(PLABEL_VERSION)/' dkms.conf \
		> $(DESTDIR)$(DKMS_SRC)/dkms.conf
	chmod 0644 $(DESTDIR)$(DKMS_SRC)/dkms.conf

# A previous build of this version is removed first, so the module is
# always built from the sources just installed.
dkms-install:
	@[ -z "$(DESTDIR)" ] || { echo "dkms-install: no DESTDIR (DKMS installs into this system; make dkms-source takes one)" >&2; exit 1; }
	@command -v dkms >/dev/null || { echo "dkms-install: dkms is not installed (apt-get install dkms)" >&2; exit 1; }
	@if [ -n "$$(dkms status -m $(DKMS_NAME) -v $(PLABEL_VERSION))" ]; then \
		echo "dkms remove -m $(DKMS_NAME) -v $(PLABEL_VERSION) --all"; \
		dkms remove -m $(DKMS_NAME) -v $(PLABEL_VERSION) --all; fi
	$(MAKE) --no-print-directory dkms-source DESTDIR=
	dkms add -m $(DKMS_NAME) -v $(PLABEL_VERSION)
	dkms install -m $(DKMS_NAME) -v $(PLABEL_VERSION) -k $(DKMS_KERNEL)

dkms-remove:
	@command -v dkms >/dev/null || { echo "dkms-remove: dkms is not installed" >&2; exit 1; }
	@if [ -n "$$(dkms status -m $(DKMS_NAME) -v $(PLABEL_VERSION))" ]; then \
		echo "dkms remove -m $(DKMS_NAME) -v $(PLABEL_VERSION) --all"; \
		dkms remove -m $(DKMS_NAME) -v $(PLABEL_VERSION) --all; fi
	rm -rf $(DKMS_SRC)

# The packages are rebuilt when a file of the tree changes (the files git
# knows, tracked or not ignored; every file but build/ without git), or
# when that list does (a file added, removed or renamed: the stamp's name
# is a hash of the list).
DEB_DIR		:= $(B)/deb
DEB_ARCH	:= $(shell dpkg --print-architecture 2>/dev/null || echo amd64)
DEB_FILES	:= $(DEB_DIR)/plabel-dkms_$(PLABEL_VERSION)_all.deb \
		   $(foreach p,libplabel1 libplabel-dev plabel,$(DEB_DIR)/$(p)_$(PLABEL_VERSION)_$(DEB_ARCH).deb)
DEB_INPUTS	:= $(shell scripts/build-deb --list-files 2>/dev/null)
DEB_STAMP	:= $(DEB_DIR)/.built-$(shell echo $(DEB_INPUTS) | md5sum | cut -c1-12)

$(DEB_STAMP): $(DEB_INPUTS) scripts/build-deb
	B=$(B) scripts/build-deb
	@touch $@
$(DEB_FILES): $(DEB_STAMP)
	@test -f $@ || { echo "$@ was not built" >&2; exit 1; }
deb: $(DEB_FILES)
