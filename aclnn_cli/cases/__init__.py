"""Cases: case files (safe YAML, the schema, attributes, fills) and importers of other suites' files,
read into `Case` objects. The bundled case files (*.yaml) sit beside these modules."""
