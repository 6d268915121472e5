"""The values of a case file, below every layer that reads them: safe YAML and its messages (yamlsafe),
numbers and fills (fill), attribute values of each kind (attrvalues). Nothing here imports ops or cases."""
