#!/bin/bash
printf 'PREFIX ?= /usr/local\n\ninstall:\n\tinstall -D -m 755 greet $(DESTDIR)$(PREFIX)/bin/greet\n' >> Makefile
# ---
cat Makefile
