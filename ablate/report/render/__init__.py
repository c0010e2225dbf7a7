"""A report written out: the section list (`sections`: the report's sections in order, with
their headings), the tables registry (`tables`, collecting the `TableSpec`s declared beside
their builders: `paper`, `configuration`, `headline`, `survival`, `secondary`, `claim_tables`,
`curves.section`, ...) and the figures registry (`figures`); tables as Markdown, LaTeX, CSV
and HTML (`formats`, `latex`); a page as one sequence of blocks (`blocks`) that every writer
formats (`writers`); a study's report page (`build`) and a reproduction's (`reproduction`)."""
