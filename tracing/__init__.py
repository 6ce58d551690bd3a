"""Cost tracing, one folder per domain:

    pricing/   what a call cost when it was made: dated price tables, time rules, FX, re-pricing
    ledger/    where every row lands: schema, migrations, the writer, the repository, reports
    observe/   the edge: the LangChain callback (CostTracer) and the OpenTelemetry export

Data flows observe -> pricing (each usage priced once) -> ledger (rows) -> reports. Import each domain
through its face (`from tracing.pricing import PriceTable`), never a module inside it.
"""
