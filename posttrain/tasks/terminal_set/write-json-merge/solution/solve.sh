#!/bin/bash
printf '#!/bin/bash\njq -s ".[0] * .[1]" "$1" "$2"\n' > merge.sh
