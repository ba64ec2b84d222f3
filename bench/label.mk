# SPDX-License-Identifier: GPL-2.0
# Placeholder: the label-cost benchmark rules follow.
