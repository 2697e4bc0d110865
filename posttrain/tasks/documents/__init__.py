"""Real documents for the professional-document domains: PDF ingestion (pdfium text, page
labels, outline, pdfplumber tables), the R manuals of Debian's r-doc-pdf, a generated
financial report with exact ground truth, and the domains built on them (docs/longctx.md)."""
