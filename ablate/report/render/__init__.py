"""A report written out: the tables registry (`tables`) and the figures registry (`figures`),
tables as Markdown, LaTeX, CSV and HTML (`formats`, `latex`), and the report pages (`build`)."""
