"""The main command group: commands that live in other modules are listed without importing them."""

from __future__ import annotations

import click


class Commands(click.Group):
    """The main group. Commands that live in other modules are imported only when one of them is run (or
    asked for its --help); the group's --help lists them with the short help written here."""

    ELSEWHERE = {  # name: (module, attribute, short help as the command's docstring starts)
        "convert": ("aclnn_cli.cases.importers.cli", "convert",
                    "Convert ATK JSON, TTK CSV or msOpST JSON case files into our YAML."),
        "harness": ("aclnn_cli.cli.device", "harness",
                    "Write the C++17 CMake project of the runner that calls the real aclnn API."),
        "run": ("aclnn_cli.cli.device", "run", "Run the cases under OUT on the device through a built runner."),
    }

    def list_commands(self, ctx) -> list[str]:
        return sorted({*super().list_commands(ctx), *self.ELSEWHERE})

    def get_command(self, ctx, name: str):
        if name in self.ELSEWHERE and name not in self.commands:
            import importlib

            module, attribute, _ = self.ELSEWHERE[name]
            self.add_command(getattr(importlib.import_module(module), attribute), name)
        return super().get_command(ctx, name)

    def format_commands(self, ctx, formatter) -> None:
        limit = formatter.width - 6 - max(map(len, self.list_commands(ctx)))
        rows = []
        for name in self.list_commands(ctx):
            if name in self.ELSEWHERE and name not in self.commands:
                text = self.ELSEWHERE[name][2]
                rows.append((name, text if len(text) <= limit else text[:limit - 3].rsplit(" ", 1)[0] + "..."))
            else:
                rows.append((name, self.commands[name].get_short_help_str(limit)))
        with formatter.section("Commands"):
            formatter.write_dl(rows)
