"""What one run shows of its items: the item evidence (:mod:`.items`; the report notebook's
HTML of it, :mod:`.items_html`), the Tasks page
(:mod:`.tasks_page`), the headline table (:mod:`.headline`), why calls failed, per endpoint and
cause (:mod:`.failures`: every view's one source), and the run's evidence file
(:mod:`.run_evidence`).

Imports the foundation (core, stats, views, records) and :mod:`evalnb.benchmarks`;
:mod:`evalnb.comparison` and every layer above may import it.
"""
