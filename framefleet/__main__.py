from framefleet.cli import main

main()
