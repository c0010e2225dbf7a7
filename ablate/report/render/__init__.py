"""A report written out: the tables registry (`tables`, collecting the `TableSpec`s declared in
`headline`, `secondary`, `claim_tables` and `curves.section`) and the figures registry
(`figures`), tables as Markdown, LaTeX, CSV and HTML (`formats`, `latex`), a study's report page
(`build`) and a reproduction's (`reproduction`)."""
