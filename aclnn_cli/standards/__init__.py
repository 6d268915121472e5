"""The precision standards and their tolerances."""
