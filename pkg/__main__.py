from gpuscope.tui.cli import main

raise SystemExit(main())
