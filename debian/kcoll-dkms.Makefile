# Makefile of kcoll's module source as kcoll-dkms installs it
# (/usr/src/kcoll-<version>); DKMS runs "make KDIR=... dkms-module" here.
# Warnings do not fail the build here: a newer compiler or kernel on the
# machine may warn where the project's own checks (W=1, no warning) did
# not, and a module that builds is what an administrator needs.
KDIR ?= /lib/modules/$(shell uname -r)/build

dkms-module:
	KCOLL_WERROR=0 sh tools/build-module.sh $(KDIR)

clean:
	rm -f kmod/*.o kmod/*.ko kmod/*.mod kmod/*.mod.c kmod/.*.cmd \
		kmod/modules.order kmod/kcoll_config.h kmod/.kcoll_config.kdir \
		Module.symvers modules.order .*.cmd .build.log

.PHONY: dkms-module clean
