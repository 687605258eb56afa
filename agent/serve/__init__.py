"""``sleuth serve``: alerts in, hunts queued and run, a person approves on a web page."""
