#!/bin/bash
sed -i '/^\[database\]/,/^\[/{s/^host = .*/host = db.internal/;s/^port = .*/port = 5433/}' settings.ini
# ---
cat settings.ini
