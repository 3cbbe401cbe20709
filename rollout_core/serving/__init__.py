"""How work is run and held in a long-lived process: the compute budget and heavy-job slots (`budget`), the pages'
result cache (`result_cache`), the upload store (`upload_store`), glibc malloc tuning (`malloc`), and the one way
to map a function over items on threads or Ray actors (`workers`)."""
