"""The observers at the edge: what a LangChain run and a ledger row look like to the outside.

    cost_tracer.py      CostTracer: the LangChain callback; turns each stage's usage into ledger rows
                        (it observes and never fails a query)
    otel_export.py      OtelExporter: one OpenTelemetry trace per query, built from the ledger's own rows
    otel_attributes.py  the span attributes (OpenTelemetry GenAI and OpenInference conventions)
"""
from tracing.observe.cost_tracer import CostTracer
from tracing.observe.otel_export import OtelExporter, normalise_endpoint, span_id_for, trace_id_for

__all__ = ["CostTracer", "OtelExporter", "normalise_endpoint", "span_id_for", "trace_id_for"]
