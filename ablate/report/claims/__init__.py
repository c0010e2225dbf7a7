"""Claims as tested statements, written one way: the `Claim` record and its verdict rule
(`rules`), the tutorial's claims (`tutorial`, `analytic`), a published paper's findings
declared by the studies that test them (`paper`), and the report's opening sentences
(`sentences`)."""
