"""The self-contained HTML report: downsampling, chart data, page (vendored uPlot in assets/)."""
