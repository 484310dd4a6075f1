from tool_failure_guard.commands.cli import main

raise SystemExit(main())
