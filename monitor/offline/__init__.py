"""The offline engine: rows and models in, typed results out (what :mod:`monitor.api` and the offline commands
``score``, ``reference``, ``estimate``, ``probe``, ``replay`` and ``report`` call).

=====================  ============================================================================================
``frames``             pandas, optional (the ``frame`` extra)
``rows``               a model and data (DataFrame, array, mapping, file, ``.jsonl`` event log) read as ``Rows``
``results``            the typed results: ``ScoreTable`` with its ``Yardstick``, ``ReferenceResult``,
                       ``AccuracyEstimate``
``keywords``           the keyword sets the functions share (scoring, standardizing, building a reference)
``baseline``           what a reference gives: standardizer, held sample, distributions, estimators, scales
``scoring``            the scorer of a baseline at a ``ScoringConfig``; ``score``
``reference_build``    the reference of reference rows (``harmonic-monitor reference`` and ``reference``)
``reference``          ``reference``: rows with their segments and labels, built by ``reference_build``
``estimate``           ``estimate``: the label-free accuracy
``probe``              ``probe`` and its ``ProbeReport``
``replay``             ``replay``: the ``run`` pipeline over an event log in event time, its ``ReplayTimeline``
``report_data``        the page's data (``ReportData``, one typed result per section)
``report_page``        the page, drawn from ``ReportData`` alone
``report``             ``build_report``: the page's six sections, gathered
=====================  ============================================================================================

Each module imports only those above it in this table (and the stages below the floor: ``model``, ``signals``,
``rolling``, ``accuracy``, ``probes``, ``gammamap``; ``replay`` runs ``runtime``'s service). The public functions
and their types are :mod:`monitor.api`'s (``monitor.score`` …); ``__all__`` names the modules.
"""

from __future__ import annotations

__all__ = [
    "baseline",
    "estimate",
    "frames",
    "keywords",
    "probe",
    "reference",
    "reference_build",
    "replay",
    "report",
    "report_data",
    "report_page",
    "results",
    "rows",
    "scoring",
]
