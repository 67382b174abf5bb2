from ctx_inspect.cli import main

raise SystemExit(main())
