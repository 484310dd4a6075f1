"""The ``tool-failure-guard`` command line: replay, render, bench, agent, demo."""
