"""The reviewer's workbench: a web app over the report database (issue 42).

Days and their audit runs, breaks with filters and keyset paging, a break's evidence, review
actions and sign-off, the sign-off log with its verification state and an export of what was
signed. No Spark is needed to serve a page. ``reckon workbench`` starts it; ``reckon users
add`` creates its users. See docs/decisions/0006-workbench-hosting.md.
"""
