"""The plot of a run's logbook: ``fitness.png`` in a run directory of ``python -m evolve run``."""
from __future__ import annotations

import io


def plot_logbook(logbook: list[dict[str, float]], objective: str) -> bytes:
    """PNG (bytes, 700 x 550 pixels) of a search's progress per generation.

    Top panel: best and median train fitness of the population, and the best
    validation fitness in the hall of fame (for a ``pareto`` run: the best
    ``speed_at_tv`` on valid among the front); bottom panel: mean program size
    (nodes). ``logbook`` is the list of logbook rows of
    :class:`evolve.search.algorithms.SearchResult` (keys ``gen``,
    ``train_max``, ``train_median``, ``best_valid``, ``size_avg`` are read);
    ``objective`` is the run's objective, used in the axis label. Drawn with
    matplotlib's Agg backend.
    """
    import matplotlib
    matplotlib.use("Agg", force=False)
    from matplotlib.figure import Figure

    gens = [r["gen"] for r in logbook]
    fig = Figure(figsize=(7, 5.5), dpi=100)
    ax, ax2 = fig.subplots(2, 1, sharex=True, gridspec_kw={"height_ratios": [3, 1]})
    ax.plot(gens, [r["train_max"] for r in logbook], label="best (train)", color="tab:blue")
    ax.plot(gens, [r["train_median"] for r in logbook], label="median (train)", color="tab:blue", alpha=0.4)
    ax.plot(gens, [r["best_valid"] for r in logbook], label="hall of fame best (valid)", color="tab:orange",
            linestyle="--")
    ax.set_ylabel(f"{objective} objective")
    ax.grid(alpha=0.3)
    ax.legend(loc="lower right", fontsize=8)
    ax2.plot(gens, [r["size_avg"] for r in logbook], color="tab:gray")
    ax2.set_ylabel("mean size")
    ax2.set_xlabel("generation")
    ax2.grid(alpha=0.3)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    return buf.getvalue()


__all__ = ["plot_logbook"]
