"""python -m aclnn_cli: the same as the aclnn-cli command."""

from .cli import main

main(prog_name="aclnn-cli")
