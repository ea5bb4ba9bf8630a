import sys

from bashrpc.server.cli.main import main

sys.exit(main())
