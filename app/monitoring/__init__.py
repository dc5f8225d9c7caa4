"""Observability that does not depend on faust: batch progress and lag, parking samples,
readiness checks. The runtime adapter feeds them and serves the results (``app.runtime.web``).
"""
