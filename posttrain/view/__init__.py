"""`posttrain view`: a local web viewer over run directories, live or finished.

    app = create_app([Path("runs/quickstart")])      # posttrain.view.app
    uvicorn.run(app, host="127.0.0.1", port=8765)

The server only reads: the SQLite trajectory store (a read-only connection per request,
so a run that is still writing is never blocked), metrics.jsonl (re-read from the byte
offset it reached last time), and the eval files. Every asset of the front end ships in
posttrain/view/static/ (no CDN: users run offline).
"""
