# SPDX-License-Identifier: GPL-2.0
#
# Manual pages: Documentation/man/NAME.SECTION.rst -> $(B)/man/NAME.SECTION,
# made with docutils' rst2man (python3-docutils); @VERSION@ in a page is
# the version in VERSION. A new page is one more .rst file here (a new
# plabel command's page is plabel-COMMAND.1.rst, and plabel.1.rst lists
# it); tests/unit/man_pages_check.sh checks them against the --help texts.
# `make install` puts them in $(MANDIR)/manSECTION/, with a plabel_*.3
# link to plabel.3 for each function of the library.

RST2MAN		?= rst2man
MANDIR		?= $(PREFIX)/share/man
MAN_SRCS	:= $(sort $(wildcard Documentation/man/*.[1-9].rst))
MAN_PAGES	:= $(patsubst Documentation/man/%.rst,$(B)/man/%,$(MAN_SRCS))
# plabel_set.3 and the others: the functions plabel.h exports
MAN3_FN_SED	:= s/^PLABEL_API .*[ *]\(plabel_[a-z_]*\)(.*/\1/p
MAN3_LINKS	:= $(shell sed -n '$(MAN3_FN_SED)' libplabel/plabel.h)

$(B)/man/%: Documentation/man/%.rst VERSION Documentation/man/build.mk
	@mkdir -p $(@D)
	sed 's/@VERSION@/$(PLABEL_VERSION)/g' $< | \
		$(RST2MAN) --strict --no-generator --no-datestamp > $@.tmp
	mv $@.tmp $@

man: $(MAN_PAGES)
.PHONY: man install-man
ALL_TARGETS	+= $(MAN_PAGES)

install-man: $(MAN_PAGES)
	@set -e; for p in $(MAN_PAGES); do \
		d=$(DESTDIR)$(MANDIR)/man$${p##*.}; \
		echo "install -m 0644 $$p $$d/"; \
		install -d $$d; install -m 0644 $$p $$d/; \
	done
	@set -e; for f in $(MAN3_LINKS); do \
		ln -sf plabel.3 $(DESTDIR)$(MANDIR)/man3/$$f.3; \
	done
install: install-man

# The pages against `plabel COMMAND --help`, plabel.h and groff.
MAN_CHECK	:= $(B)/tests/unit/man_pages_check
$(MAN_CHECK): tests/unit/man_pages_check.sh $(PLABEL_BIN) $(MAN_PAGES)
	@mkdir -p $(@D)
	cp $< $@
	chmod +x $@
HOST_TESTS	+= $(MAN_CHECK)
ALL_TARGETS	+= $(MAN_CHECK)
