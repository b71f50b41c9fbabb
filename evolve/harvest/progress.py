"""The harvest's progress bar on the terminal (rich): texts, generated tokens, tokens per second."""
from __future__ import annotations


def stderr_console():
    """A rich console on stderr."""
    from rich.console import Console

    return Console(stderr=True)


class ProgressBar:
    """Rich progress bar over texts with generated tokens and tokens per second."""

    def __init__(self, console, total: int, done: int, enabled: bool = True):
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, \
            TimeRemainingColumn

        self.enabled = enabled
        self.progress = Progress(TextColumn("harvest texts"), BarColumn(), MofNCompleteColumn(),
                                 TextColumn("{task.fields[tokens]} tokens"),
                                 TextColumn("{task.fields[tps]:.1f} tok/s"), TimeElapsedColumn(),
                                 TimeRemainingColumn(), console=console, disable=not enabled)
        self.task = self.progress.add_task("harvest", total=total, completed=done, tokens=0, tps=0.0)

    def __enter__(self):
        self.progress.__enter__()
        return self

    def __exit__(self, *exc):
        return self.progress.__exit__(*exc)

    def tokens(self, n: int, seconds: float) -> None:
        """Show ``n`` generated tokens after ``seconds`` of this run."""
        self.progress.update(self.task, tokens=n, tps=n / seconds if seconds > 0 else 0.0)

    def text_done(self) -> None:
        """Advance the bar by one finished text."""
        self.progress.advance(self.task)
