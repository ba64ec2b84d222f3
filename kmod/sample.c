// SPDX-License-Identifier: GPL-2.0
/* Sampling: placeholder until sampling lands. */
#include "internal.h"
