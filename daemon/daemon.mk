# SPDX-License-Identifier: MIT
#
# kcollctl (CLI) and kcolld (node agent), included from the top-level
# Makefile. Expects TOP, BUILD, CC and CFLAGS_USER; uses LIBCOLL_VERSION
# and LIBCOLL_PREFIX (libcoll/libcoll.mk) for the version and install
# prefix. Needs libnl-genl-3 and json-c (Debian: libnl-genl-3-dev,
# libjson-c-dev; tools/install-deps.sh).
#
#   make daemon           $(BUILD)/daemon/kcollctl and kcolld
#   make daemon-install   both under $(PREFIX)/sbin, man pages, example
#                         configuration

DAEMON_SRCDIR	:= $(TOP)/daemon
DAEMON_BUILD	:= $(BUILD)/daemon
DAEMON_PKGS	:= libnl-genl-3.0 json-c
DAEMON_PKG_CFLAGS := $(shell pkg-config --cflags $(DAEMON_PKGS) 2>/dev/null)
DAEMON_PKG_LIBS	:= $(shell pkg-config --libs $(DAEMON_PKGS) 2>/dev/null)
# DAEMON_EXTRA_CFLAGS, DAEMON_EXTRA_LDFLAGS: added (Debian's build flags,
# debian/rules).
DAEMON_CFLAGS	:= $(CFLAGS_USER) $(DAEMON_PKG_CFLAGS) \
		   -DKC_VERSION='"$(LIBCOLL_VERSION)"' -MMD -MP \
		   $(DAEMON_EXTRA_CFLAGS)

KCOLLCTL	:= $(DAEMON_BUILD)/kcollctl
KCOLLD		:= $(DAEMON_BUILD)/kcolld

# Shared by both programs (and, as sources, by the unit tests).
DAEMON_COMMON	:= kc_model kc_fmt kc_render kc_nlparse kc_nl
KCOLLCTL_OBJS	:= $(patsubst %,$(DAEMON_BUILD)/%.o,kcollctl $(DAEMON_COMMON))
KCOLLD_OBJS	:= $(patsubst %,$(DAEMON_BUILD)/%.o,kcolld kc_config \
		     kc_prom kc_http $(DAEMON_COMMON))
DAEMON_OBJS	:= $(sort $(KCOLLCTL_OBJS) $(KCOLLD_OBJS))

.PHONY: daemon daemon-install daemon-clean daemon-pkgcheck

daemon: $(KCOLLCTL) $(KCOLLD)

daemon-pkgcheck:
	@pkg-config --exists $(DAEMON_PKGS) || { echo "daemon: pkg-config" \
		"finds no $(DAEMON_PKGS): run 'make deps' (as root) or install" \
		"libnl-genl-3-dev and libjson-c-dev" >&2; exit 1; }

$(DAEMON_OBJS): $(DAEMON_BUILD)/%.o: $(DAEMON_SRCDIR)/%.c \
		$(DAEMON_SRCDIR)/daemon.mk | daemon-pkgcheck
	@mkdir -p $(dir $@)
	$(CC) $(DAEMON_CFLAGS) -c -o $@ $<

$(KCOLLCTL): $(KCOLLCTL_OBJS)
	$(CC) $(DAEMON_EXTRA_LDFLAGS) -o $@ $(KCOLLCTL_OBJS) $(DAEMON_PKG_LIBS)

$(KCOLLD): $(KCOLLD_OBJS)
	$(CC) $(DAEMON_EXTRA_LDFLAGS) -o $@ $(KCOLLD_OBJS) $(DAEMON_PKG_LIBS)

-include $(DAEMON_OBJS:.o=.d)

DAEMON_PREFIX	= $(if $(PREFIX),$(PREFIX),/usr/local)

daemon-install: daemon
	install -d $(DESTDIR)$(DAEMON_PREFIX)/sbin \
		$(DESTDIR)$(DAEMON_PREFIX)/share/man/man8 \
		$(DESTDIR)$(DAEMON_PREFIX)/share/doc/kcoll
	install -m 0755 $(KCOLLCTL) $(KCOLLD) $(DESTDIR)$(DAEMON_PREFIX)/sbin/
	install -m 0644 $(DAEMON_SRCDIR)/kcollctl.8 $(DAEMON_SRCDIR)/kcolld.8 \
		$(DESTDIR)$(DAEMON_PREFIX)/share/man/man8/
	install -m 0644 $(DAEMON_SRCDIR)/kcolld.conf.example \
		$(DESTDIR)$(DAEMON_PREFIX)/share/doc/kcoll/

daemon-clean:
	rm -rf $(DAEMON_BUILD)
