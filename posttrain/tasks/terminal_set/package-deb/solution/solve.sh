#!/bin/bash
s=$(mktemp -d) && mkdir -p $s/DEBIAN $s/usr/local/bin && install -m 755 hello $s/usr/local/bin/hello-pt && printf 'Package: hello-pt\nVersion: 1.0\nArchitecture: all\nMaintainer: dev <dev@example.com>\nDescription: hello\n' > $s/DEBIAN/control && mkdir -p dist && dpkg-deb --build --root-owner-group $s dist/hello-pt_1.0_all.deb
# ---
dpkg-deb -I dist/hello-pt_1.0_all.deb
