from worker_ami.agent.cli import main

main()
