#!/bin/bash
mkdir -p $2
for f in $(ls $1/*.txt); do
  cp $f $2/
done
