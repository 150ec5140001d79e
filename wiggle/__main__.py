from wiggle.cli import main

raise SystemExit(main())
