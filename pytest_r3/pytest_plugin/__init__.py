"""Everything that speaks pytest: options, hooks, recording inside tests, the tuning and
checking sessions, oracle re-runs and the terminal table. Nothing below imports it."""
