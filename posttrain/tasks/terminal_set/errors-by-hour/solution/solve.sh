#!/bin/bash
{ echo hour,count; grep ' ERROR ' app.log | cut -c1-13 | sort | uniq -c | awk '{print $2 "," $1}'; } > errors_by_hour.csv
