"""Export targets that are inference engines: a champion written in the form an engine reads."""
