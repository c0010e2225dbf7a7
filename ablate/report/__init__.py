"""The report: one study's results (or several studies' findings) as statistics, claims, tables
and figures. Sub-packages, each importing only those above it in this list:

- `data`: the `StudyData` contract and its loading, the `Table` record and its declaration;
- `stats`: inference over seeds, per-trial measures, the contrasts, `ablate plan`;
- `claims` / `curves`: tested claims (tutorial, analytic, a paper's findings) / compute curves;
- `render`: the tables and figures registries, the formats, the report pages.
"""
