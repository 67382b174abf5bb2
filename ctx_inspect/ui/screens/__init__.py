"""One screen per view (Textual modes), and the modal screens."""
