"""Reports of a verify run for people and CI systems (console, JSON, JUnit, CSV)."""
