import sys

from sirius.cli import main

sys.exit(main())
