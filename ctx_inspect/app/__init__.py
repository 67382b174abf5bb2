"""What the command line and the dashboard both do: load inputs into sessions, follow them
live, act on them, replay, explain and sweep, and build profiles from the configuration."""
