"""Hook implementations of this plugin (kept thin: heavy imports happen in the factories)."""
