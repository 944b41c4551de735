import sys

from stormotel.cli import main

sys.exit(main())
