# SPDX-License-Identifier: MIT
#
# libcoll build fragment, included from the top-level Makefile.
#
# Expects: TOP (the repository root) and CC. Optional: AR, PREFIX, DESTDIR,
# LIBCOLL_EXTRA_CFLAGS, LIBCOLL_EXTRA_LDFLAGS, LIBCOLL_BUILD.
#
# Provides:
#   LIBCOLL_SO        shared library (soname libcoll.so.0), with the
#                     libcoll.so.0 and libcoll.so symlinks next to it
#   LIBCOLL_A         static library
#   LIBCOLL_CPPFLAGS  include flags for code using libcoll (coll.h, linux/kcoll.h)
#   LIBCOLL_LIBS      what a program linking LIBCOLL_A needs besides it
#   targets: libcoll, libcoll-install, libcoll-clean (phony)

LIBCOLL_VERSION	:= 0.6.0
LIBCOLL_SONAME	:= libcoll.so.0
LIBCOLL_SRCDIR	:= $(TOP)/libcoll
LIBCOLL_BUILD	?= $(TOP)/build/libcoll

LIBCOLL_SO	:= $(LIBCOLL_BUILD)/libcoll.so.$(LIBCOLL_VERSION)
LIBCOLL_SO_LINKS := $(LIBCOLL_BUILD)/$(LIBCOLL_SONAME) $(LIBCOLL_BUILD)/libcoll.so
LIBCOLL_A	:= $(LIBCOLL_BUILD)/libcoll.a
LIBCOLL_MAP	:= $(LIBCOLL_SRCDIR)/libcoll.map
LIBCOLL_PC	:= $(LIBCOLL_BUILD)/libcoll.pc

LIBCOLL_SRCS	:= $(LIBCOLL_SRCDIR)/ring.c $(LIBCOLL_SRCDIR)/bootstrap.c \
		   $(LIBCOLL_SRCDIR)/comm.c $(LIBCOLL_SRCDIR)/cuda.c \
		   $(LIBCOLL_SRCDIR)/family.c
# The module's plain schedule code: the GPU steps of stream-ordered ops.
LIBCOLL_KSRCS	:= $(TOP)/kmod/kcoll_sched.c $(TOP)/kmod/kcoll_sched_log.c $(TOP)/kmod/kcoll_sched_vec.c
LIBCOLL_OBJS	:= $(patsubst $(LIBCOLL_SRCDIR)/%.c,$(LIBCOLL_BUILD)/%.o,$(LIBCOLL_SRCS)) \
		   $(patsubst $(TOP)/kmod/%.c,$(LIBCOLL_BUILD)/%.o,$(LIBCOLL_KSRCS)) \
		   $(LIBCOLL_BUILD)/fatbin.o
# The CUDA kernels' fatbin (kernels/kernels.mk builds it, empty without nvcc).
KERNELS_FATBIN	?= $(TOP)/build/kernels/kcoll_kernels.fatbin

LIBCOLL_CPPFLAGS := -I$(LIBCOLL_SRCDIR)/include -I$(TOP)/uapi
LIBCOLL_CFLAGS	:= -std=gnu11 -Wall -Wextra -Werror -O2 -g -fPIC -pthread \
		   -fvisibility=hidden $(LIBCOLL_CPPFLAGS) -MMD -MP \
		   -I$(TOP)/kmod -I$(TOP)/kernels $(LIBCOLL_EXTRA_CFLAGS)
LIBCOLL_LDFLAGS	:= -shared -pthread -Wl,-soname,$(LIBCOLL_SONAME) \
		   -Wl,--version-script=$(LIBCOLL_MAP) \
		   -Wl,-z,defs -Wl,-z,relro -Wl,-z,now $(LIBCOLL_EXTRA_LDFLAGS)

LIBCOLL_LIBS	:= -pthread

LIBCOLL_PREFIX	= $(if $(PREFIX),$(PREFIX),/usr/local)
# LIBDIR: where the libraries and libcoll.pc go (Debian's packages:
# /usr/lib/<multiarch triplet>); default PREFIX/lib.
LIBCOLL_LIBDIR	= $(if $(LIBDIR),$(LIBDIR),$(LIBCOLL_PREFIX)/lib)

.PHONY: libcoll libcoll-install libcoll-clean

libcoll: $(LIBCOLL_SO) $(LIBCOLL_SO_LINKS) $(LIBCOLL_A)

$(LIBCOLL_BUILD):
	mkdir -p $@

$(patsubst $(TOP)/kmod/%.c,$(LIBCOLL_BUILD)/%.o,$(LIBCOLL_KSRCS)): \
		$(LIBCOLL_BUILD)/%.o: $(TOP)/kmod/%.c $(LIBCOLL_SRCDIR)/libcoll.mk | $(LIBCOLL_BUILD)
	$(CC) $(LIBCOLL_CFLAGS) -c -o $@ $<

$(patsubst $(LIBCOLL_SRCDIR)/%.c,$(LIBCOLL_BUILD)/%.o,$(LIBCOLL_SRCS)): $(LIBCOLL_BUILD)/%.o: $(LIBCOLL_SRCDIR)/%.c \
		 $(LIBCOLL_SRCDIR)/libcoll.mk | $(LIBCOLL_BUILD)
	$(CC) $(LIBCOLL_CFLAGS) -c -o $@ $<

$(LIBCOLL_BUILD)/fatbin.o: $(LIBCOLL_SRCDIR)/fatbin.S $(KERNELS_FATBIN) \
			   $(LIBCOLL_SRCDIR)/libcoll.mk | $(LIBCOLL_BUILD)
	$(CC) -c -DKCOLL_FATBIN='"$(KERNELS_FATBIN)"' -o $@ $<

$(LIBCOLL_SO): $(LIBCOLL_OBJS) $(LIBCOLL_MAP)
	$(CC) $(LIBCOLL_LDFLAGS) -o $@ $(LIBCOLL_OBJS)

$(LIBCOLL_BUILD)/$(LIBCOLL_SONAME): $(LIBCOLL_SO)
	ln -sfn $(notdir $(LIBCOLL_SO)) $@

$(LIBCOLL_BUILD)/libcoll.so: $(LIBCOLL_BUILD)/$(LIBCOLL_SONAME)
	ln -sfn $(LIBCOLL_SONAME) $@

$(LIBCOLL_A): $(LIBCOLL_OBJS)
	rm -f $@
	$(AR) rcs $@ $(LIBCOLL_OBJS)

# Regenerated on every install: PREFIX may differ from the last run.
libcoll-install: libcoll
	sed -e 's|@PREFIX@|$(LIBCOLL_PREFIX)|g' -e 's|@LIBDIR@|$(LIBCOLL_LIBDIR)|g' \
		$(LIBCOLL_SRCDIR)/libcoll.pc.in > $(LIBCOLL_PC)
	install -d $(DESTDIR)$(LIBCOLL_LIBDIR)/pkgconfig \
		$(DESTDIR)$(LIBCOLL_PREFIX)/include/linux
	install -m 0644 $(LIBCOLL_SRCDIR)/include/coll.h $(DESTDIR)$(LIBCOLL_PREFIX)/include/
	install -m 0644 $(TOP)/uapi/linux/kcoll.h $(DESTDIR)$(LIBCOLL_PREFIX)/include/linux/
	install -m 0755 $(LIBCOLL_SO) $(DESTDIR)$(LIBCOLL_LIBDIR)/
	ln -sfn $(notdir $(LIBCOLL_SO)) $(DESTDIR)$(LIBCOLL_LIBDIR)/$(LIBCOLL_SONAME)
	ln -sfn $(LIBCOLL_SONAME) $(DESTDIR)$(LIBCOLL_LIBDIR)/libcoll.so
	install -m 0644 $(LIBCOLL_A) $(DESTDIR)$(LIBCOLL_LIBDIR)/
	install -m 0644 $(LIBCOLL_PC) $(DESTDIR)$(LIBCOLL_LIBDIR)/pkgconfig/

libcoll-clean:
	rm -rf $(LIBCOLL_BUILD)

-include $(filter-out %/fatbin.d,$(LIBCOLL_OBJS:.o=.d))
