from tool_failure_guard.cli import main

raise SystemExit(main())
